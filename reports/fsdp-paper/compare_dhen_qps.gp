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
16 24185.6
32 24375.5
64 24179.2
128 23602.8
256 22412.5
512 19106.9
EOD
$d1 << EOD
16 24523.1
32 24962.6
64 24977.5
128 24542.7
256 23445.6
512 20001.3
EOD
$d2 << EOD
16 22995.0
32 22533.0
64 22211.7
128 21935.3
256 21666.3
512 21478.1
EOD
$d3 << EOD
16 23211.7
32 22741.1
64 22413.9
128 22132.4
256 21858.6
512 21667.1
EOD
plot $d0 using 1:2 with linespoints lw 2 pt 7 lc rgb "#08519c" title "full + RAF (FULL_SHARD)", \
     $d1 using 1:2 with linespoints lw 2 pt 7 lc rgb "#6baed6" title "full + NRAF (SHARD_GRAD_OP)", \
     $d2 using 1:2 with linespoints lw 2 pt 7 lc rgb "#a50f15" title "hybrid + RAF (HYBRID_SHARD)", \
     $d3 using 1:2 with linespoints lw 2 pt 7 lc rgb "#fc9272" title "hybrid + NRAF (_HYBRID_SHARD_ZERO2)"
