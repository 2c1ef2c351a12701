# fsdpsim report: throughput and peak reserved memory against training.micro_batch.
# From sweep.csv; data: points.tsv, best_training_micro_batch.tsv. Edit freely, then re-render with: gnuplot axis_training_micro_batch.gp
if (!exists("outfile")) outfile = 'axis_training_micro_batch.svg'
set terminal svg size 1100,460 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set datafile separator "\t"
set multiplot layout 1,2 title 'training.micro_batch' font ",14"
set xrange [-0.5:1.5]
set xtics ('48' 0, '58' 1)
set xlabel 'training.micro_batch'
set yrange [0:*]
set grid ytics lc rgb "#dddddd"
set key below
set title "throughput"
set ylabel "tokens/s per GPU"
plot "points.tsv" using (strcol(2) eq "ok" ? column(8) : 1/0):3 with points pt 7 ps 0.5 lc rgb "#6baed6" title "fits", \
     "best_training_micro_batch.tsv" using 1:3 with linespoints lw 2 pt 7 ps 0.9 lc rgb "#08519c" title "best that fits"
set title "peak reserved memory"
set ylabel "peak reserved memory per GPU (GiB)"
plot "points.tsv" using (strcol(2) eq "ok" ? column(8) : 1/0):4 with points pt 7 ps 0.5 lc rgb "#6baed6" title "fits", \
     "best_training_micro_batch.tsv" using 1:4 with linespoints lw 2 pt 7 ps 0.9 lc rgb "#08519c" title "best that fits"
unset multiplot
