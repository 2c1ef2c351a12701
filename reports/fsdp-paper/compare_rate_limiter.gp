# .ci/make-paper-report: Rate limiter: step time off / on (above 1: the limiter helps). Re-render with: gnuplot compare_rate_limiter.gp
if (!exists("outfile")) outfile = "compare_rate_limiter.svg"
set terminal svg size 760,440 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set title "Rate limiter: step time off / on (above 1: the limiter helps)" font ",13"
set xlabel "model, nodes"
set ylabel "latency without limiter / with limiter"
set grid lc rgb "#dddddd"
set key below
set xtics ("T5 2n" 0, "T5 4n" 1, "RegNet 2n" 2, "RegNet 4n" 3, "DeepViT 2n" 4, "DeepViT 4n" 5)
set xrange [-0.5:5.5]
set logscale y 2
set yrange [0.8:6]
$d0 << EOD
0 1.0646
1 1.0903
2 1.0054
3 1.0153
4 1.0129
5 1.0050
EOD
$d1 << EOD
0 2.2261
1 3.0538
5 0.9495
EOD
$d2 << EOD
2 1.0
3 1.0
EOD
$d3 << EOD
-0.5 1
5.5 1
EOD
plot $d0 using 1:2 with points ps 1.6 pt 7 lc rgb "#08519c" title "fsdpsim", \
     $d1 using 1:2 with points ps 1.8 pt 6 lw 2 lc rgb "#de2d26" title "paper [U] (median latency read off Fig. 6c)", \
     $d2 using 1:2 with points ps 1.8 pt 4 lw 2 lc rgb "#de2d26" title "paper [V]: RegNet no gain", \
     $d3 using 1:2 with lines dt 2 lw 1 lc rgb "#636363" title "no effect"
