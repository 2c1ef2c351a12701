# .ci/make-paper-report: GPT-175B: hardware TFLOPS/GPU vs GPUs. Re-render with: gnuplot compare_gpt175b_scaling.gp
if (!exists("outfile")) outfile = "compare_gpt175b_scaling.svg"
set terminal svg size 760,440 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set title "GPT-175B: hardware TFLOPS/GPU vs GPUs" font ",13"
set xlabel "GPUs (8 per node assumed)"
set ylabel "TFLOPS per GPU (counting the recompute)"
set grid lc rgb "#dddddd"
set key below
set logscale x 2
set xtics ("128" 128, "192" 192, "256" 256, "384" 384, "512" 512)
set xrange [112:590]
set yrange [0:250]
$d0 << EOD
128 171.32
192 171.09
256 170.82
384 170.35
512 169.88
EOD
$d1 << EOD
128 186.27
192 186.09
256 185.91
384 185.56
512 185.28
EOD
$d2 << EOD
128 173
192 173
256 173
384 173
512 173
EOD
$d3 << EOD
128 186
192 186
256 186
384 186
512 186
EOD
plot $d0 using 1:2 with linespoints lw 2 pt 7 lc rgb "#08519c" title "fsdpsim, batch 1", \
     $d1 using 1:2 with linespoints lw 2 pt 7 lc rgb "#de2d26" title "fsdpsim, batch 2", \
     $d2 using 1:2 with lines dt 2 lw 2 lc rgb "#6baed6" title "paper, batch 1: > 173 (Sec. 5.4, linear scaling)", \
     $d3 using 1:2 with lines dt 2 lw 2 lc rgb "#fc9272" title "paper, batch 2: 186 (Sec. 5.4, linear scaling)"
