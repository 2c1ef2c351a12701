# fsdpsim report: throughput and peak reserved memory against fsdp.shard_group_size.
# From sweep.csv; data: points.tsv, best_fsdp_shard_group_size.tsv. Edit freely, then re-render with: gnuplot axis_fsdp_shard_group_size.gp
if (!exists("outfile")) outfile = 'axis_fsdp_shard_group_size.svg'
set terminal svg size 1100,460 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set datafile separator "\t"
set multiplot layout 1,2 title 'fsdp.shard_group_size' font ",14"
set xrange [-0.5:5.5]
set xtics ('2' 0, '4' 1, '8' 2, '16' 3, '32' 4, '64' 5)
set xlabel 'fsdp.shard_group_size'
set yrange [0:*]
set grid ytics lc rgb "#dddddd"
set key below
set label 1 "nothing fits" at 0, graph 0.06 center textcolor rgb "#de2d26"
set title "throughput"
set ylabel "tokens/s per GPU"
plot "points.tsv" using (strcol(2) eq "ok" ? column(6) : 1/0):3 with points pt 7 ps 0.5 lc rgb "#6baed6" title "fits", \
     "points.tsv" using (strcol(2) eq "oom" ? column(6) : 1/0):3 with points pt 2 ps 0.6 lc rgb "#de2d26" title "out of memory", \
     "best_fsdp_shard_group_size.tsv" using 1:3 with linespoints lw 2 pt 7 ps 0.9 lc rgb "#08519c" title "best that fits"
set title "peak reserved memory"
set ylabel "peak reserved memory per GPU (GiB)"
plot "points.tsv" using (strcol(2) eq "ok" ? column(6) : 1/0):4 with points pt 7 ps 0.5 lc rgb "#6baed6" title "fits", \
     "points.tsv" using (strcol(2) eq "oom" ? column(6) : 1/0):4 with points pt 2 ps 0.6 lc rgb "#de2d26" title "out of memory", \
     "best_fsdp_shard_group_size.tsv" using 1:4 with linespoints lw 2 pt 7 ps 0.9 lc rgb "#08519c" title "best that fits"
unset multiplot
