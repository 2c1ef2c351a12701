# .ci/make-paper-report: DHEN dense part: peak allocated memory vs GPUs. Re-render with: gnuplot compare_dhen_memory.gp
if (!exists("outfile")) outfile = "compare_dhen_memory.svg"
set terminal svg size 760,440 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set title "DHEN dense part: peak allocated memory vs GPUs" font ",13"
set xlabel "GPUs (8 per node assumed)"
set ylabel "peak allocated memory per GPU (GiB)"
set grid lc rgb "#dddddd"
set key below
set logscale x 2
set xtics ("16" 16, "32" 32, "64" 64, "128" 128, "256" 256, "512" 512)
set xrange [14:590]
set yrange [0:*]
$d0 << EOD
16 1.6617
32 1.4696
64 1.3735
128 1.3255
256 1.3015
512 1.2895
EOD
$d1 << EOD
16 2.4351
32 2.2430
64 2.1469
128 2.0989
256 2.0749
512 2.0629
EOD
$d2 << EOD
16 2.0459
32 2.0459
64 2.0459
128 2.0459
256 2.0459
512 2.0459
EOD
$d3 << EOD
16 2.8193
32 2.8193
64 2.8193
128 2.8193
256 2.8193
512 2.8193
EOD
plot $d0 using 1:2 with linespoints lw 2 pt 7 lc rgb "#08519c" title "full + RAF (FULL_SHARD)", \
     $d1 using 1:2 with linespoints lw 2 pt 7 lc rgb "#6baed6" title "full + NRAF (SHARD_GRAD_OP)", \
     $d2 using 1:2 with linespoints lw 2 pt 7 lc rgb "#a50f15" title "hybrid + RAF (HYBRID_SHARD)", \
     $d3 using 1:2 with linespoints lw 2 pt 7 lc rgb "#fc9272" title "hybrid + NRAF (_HYBRID_SHARD_ZERO2)"
