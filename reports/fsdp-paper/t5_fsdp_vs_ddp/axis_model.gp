# fsdpsim report: throughput and peak reserved memory against model.
# From sweep.csv; data: points.tsv, best_model.tsv. Edit freely, then re-render with: gnuplot axis_model.gp
if (!exists("outfile")) outfile = 'axis_model.svg'
set terminal svg size 1100,460 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set datafile separator "\t"
set multiplot layout 1,2 title 'model' font ",14"
set xrange [-0.5:2.5]
set xtics ('{"ffn_dim":2816,"preset":"t5-large"}' 0, '{"ffn_dim":10496,"preset":"t5-3b"}' 1, 't5-11b' 2) rotate by -30 left
set xlabel 'model'
set yrange [0:*]
set grid ytics lc rgb "#dddddd"
set key below
set title "throughput"
set ylabel "tokens/s per GPU"
plot "points.tsv" using (strcol(2) eq "ok" ? column(6) : 1/0):3 with points pt 7 ps 0.5 lc rgb "#6baed6" title "fits", \
     "points.tsv" using (strcol(2) eq "oom" ? column(6) : 1/0):3 with points pt 2 ps 0.6 lc rgb "#de2d26" title "out of memory", \
     "best_model.tsv" using 1:3 with points lw 2 pt 7 ps 1.2 lc rgb "#08519c" title "best that fits"
set title "peak reserved memory"
set ylabel "peak reserved memory per GPU (GiB)"
plot "points.tsv" using (strcol(2) eq "ok" ? column(6) : 1/0):4 with points pt 7 ps 0.5 lc rgb "#6baed6" title "fits", \
     "points.tsv" using (strcol(2) eq "oom" ? column(6) : 1/0):4 with points pt 2 ps 0.6 lc rgb "#de2d26" title "out of memory", \
     "best_model.tsv" using 1:4 with points lw 2 pt 7 ps 1.2 lc rgb "#08519c" title "best that fits"
unset multiplot
