# .ci/make-paper-report: DHEN dense part: QPS per GPU vs GPUs. Re-render with: gnuplot compare_dhen_qps.gp
if (!exists("outfile")) outfile = "compare_dhen_qps.svg"
set terminal svg size 760,440 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set title "DHEN dense part: QPS per GPU vs GPUs" font ",13"
set xlabel "GPUs (8 per node assumed)"
set ylabel "samples/s per GPU"
set grid lc rgb "#dddddd"
set key below
set logscale x 2
set xtics ("16" 16, "32" 32, "64" 64, "128" 128, "256" 256, "512" 512)
set xrange [14:590]
$d0 << EOD
16 23626.9
32 23330.9
64 23201.1
128 22674.8
256 21555.3
512 18629.0
EOD
$d1 << EOD
16 23870.0
32 23792.4
64 23853.6
128 23528.8
256 22454.7
512 19275.6
EOD
$d2 << EOD
16 22246.8
32 21796.3
64 21466.6
128 21212.5
256 21026.0
512 20848.7
EOD
$d3 << EOD
16 22447.5
32 21984.8
64 21641.3
128 21383.1
256 21193.6
512 21013.5
EOD
plot $d0 using 1:2 with linespoints lw 2 pt 7 lc rgb "#08519c" title "full + RAF (FULL_SHARD)", \
     $d1 using 1:2 with linespoints lw 2 pt 7 lc rgb "#6baed6" title "full + NRAF (SHARD_GRAD_OP)", \
     $d2 using 1:2 with linespoints lw 2 pt 7 lc rgb "#a50f15" title "hybrid + RAF (HYBRID_SHARD)", \
     $d3 using 1:2 with linespoints lw 2 pt 7 lc rgb "#fc9272" title "hybrid + NRAF (_HYBRID_SHARD_ZERO2)"
