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
16 24602.5
32 24810.3
64 24591.0
128 24066.1
256 22750.8
512 19472.9
EOD
$d1 << EOD
16 25054.5
32 25357.5
64 25362.0
128 24994.8
256 23848.6
512 20293.8
EOD
$d2 << EOD
16 23324.5
32 22946.7
64 22613.5
128 22327.1
256 22048.4
512 21853.6
EOD
$d3 << EOD
16 23585.7
32 23199.5
64 22859.0
128 22566.3
256 22281.7
512 22082.8
EOD
plot $d0 using 1:2 with linespoints lw 2 pt 7 lc rgb "#08519c" title "full + RAF (FULL_SHARD)", \
     $d1 using 1:2 with linespoints lw 2 pt 7 lc rgb "#6baed6" title "full + NRAF (SHARD_GRAD_OP)", \
     $d2 using 1:2 with linespoints lw 2 pt 7 lc rgb "#a50f15" title "hybrid + RAF (HYBRID_SHARD)", \
     $d3 using 1:2 with linespoints lw 2 pt 7 lc rgb "#fc9272" title "hybrid + NRAF (_HYBRID_SHARD_ZERO2)"
