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
16 24561.5
32 24779.0
64 24578.6
128 23969.5
256 22718.0
512 19193.2
EOD
$d1 << EOD
16 24772.7
32 25277.0
64 25296.7
128 24917.4
256 23709.6
512 20193.1
EOD
$d2 << EOD
16 23315.5
32 22816.8
64 22447.0
128 22169.3
256 21965.7
512 21772.3
EOD
$d3 << EOD
16 23408.1
32 22905.4
64 22532.7
128 22252.9
256 22047.8
512 21853.0
EOD
plot $d0 using 1:2 with linespoints lw 2 pt 7 lc rgb "#08519c" title "full + RAF (FULL_SHARD)", \
     $d1 using 1:2 with linespoints lw 2 pt 7 lc rgb "#6baed6" title "full + NRAF (SHARD_GRAD_OP)", \
     $d2 using 1:2 with linespoints lw 2 pt 7 lc rgb "#a50f15" title "hybrid + RAF (HYBRID_SHARD)", \
     $d3 using 1:2 with linespoints lw 2 pt 7 lc rgb "#fc9272" title "hybrid + NRAF (_HYBRID_SHARD_ZERO2)"
