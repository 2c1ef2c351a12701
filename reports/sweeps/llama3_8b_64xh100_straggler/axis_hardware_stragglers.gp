# fsdpsim report: throughput and peak reserved memory against hardware.stragglers.
# From sweep.csv; data: points.tsv, best_hardware_stragglers.tsv. Edit freely, then re-render with: gnuplot axis_hardware_stragglers.gp
if (!exists("outfile")) outfile = 'axis_hardware_stragglers.svg'
set terminal svg size 1100,460 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set datafile separator "\t"
set multiplot layout 1,2 title 'hardware.stragglers' font ",14"
set xrange [-0.5:5.5]
set xtics ('[]' 0, '[{"compute_speed":0.92,"ranks":[13]}]' 1, '[{"compute_speed":0.67,"ranks":[13]}]' 2, '[{"compute_speed":0.92,"nodes":[1]}]' 3, '[{"host_speed":0.5,"ranks":[13]}]' 4, '[{"host_speed":0.1,"ranks":[13]}]' 5) rotate by -30 left
set xlabel 'hardware.stragglers'
set yrange [0:*]
set grid ytics lc rgb "#dddddd"
set key below
set title "throughput"
set ylabel "tokens/s per GPU"
plot "points.tsv" using (strcol(2) eq "ok" ? column(8) : 1/0):3 with points pt 7 ps 0.5 lc rgb "#6baed6" title "fits", \
     "best_hardware_stragglers.tsv" using 1:3 with points lw 2 pt 7 ps 1.2 lc rgb "#08519c" title "best that fits"
set title "peak reserved memory"
set ylabel "peak reserved memory per GPU (GiB)"
plot "points.tsv" using (strcol(2) eq "ok" ? column(8) : 1/0):4 with points pt 7 ps 0.5 lc rgb "#6baed6" title "fits", \
     "best_hardware_stragglers.tsv" using 1:4 with points lw 2 pt 7 ps 1.2 lc rgb "#08519c" title "best that fits"
unset multiplot
