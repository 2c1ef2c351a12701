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
16 26012.2
32 25862.7
64 25559.9
128 24999.9
256 23873.7
512 20753.7
EOD
$d1 << EOD
16 26479.5
32 26458.2
64 26327.9
128 25919.0
256 24908.0
512 21532.7
EOD
$d2 << EOD
16 25374.9
32 24969.5
64 24680.7
128 24438.9
256 24124.2
512 23592.8
EOD
$d3 << EOD
16 25679.2
32 25264.1
64 24968.5
128 24721.0
256 24399.0
512 23855.6
EOD
plot $d0 using 1:2 with linespoints lw 2 pt 7 lc rgb "#08519c" title "full + RAF (FULL_SHARD)", \
     $d1 using 1:2 with linespoints lw 2 pt 7 lc rgb "#6baed6" title "full + NRAF (SHARD_GRAD_OP)", \
     $d2 using 1:2 with linespoints lw 2 pt 7 lc rgb "#a50f15" title "hybrid + RAF (HYBRID_SHARD)", \
     $d3 using 1:2 with linespoints lw 2 pt 7 lc rgb "#fc9272" title "hybrid + NRAF (_HYBRID_SHARD_ZERO2)"
