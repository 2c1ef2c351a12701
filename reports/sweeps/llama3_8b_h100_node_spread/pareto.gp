# fsdpsim report: throughput vs peak reserved memory and its Pareto front.
# From sweep.csv; data: points.tsv, pareto.tsv. Edit freely, then re-render with: gnuplot pareto.gp
if (!exists("outfile")) outfile = 'pareto.svg'
set terminal svg size 900,560 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set datafile separator "\t"
set title "Pareto front: tokens/s per GPU vs peak reserved memory (points that fit)"
set xlabel "peak reserved memory per GPU (GiB)"
set ylabel "tokens/s per GPU"
set grid lc rgb "#dddddd"
set key below
set offsets graph 0.05, graph 0.08, graph 0.08, graph 0.05
plot "points.tsv" using (strcol(2) eq "ok" ? $4 : 1/0):3 with points pt 7 ps 0.6 lc rgb "#6baed6" title "fits", \
     "pareto.tsv" using 1:2 with linespoints lw 2 pt 7 ps 1.0 lc rgb "#08519c" title "Pareto front (label: point index)", \
     "pareto.tsv" using 1:2:3 with labels left offset char 0.8,0.6 font ",10" notitle
