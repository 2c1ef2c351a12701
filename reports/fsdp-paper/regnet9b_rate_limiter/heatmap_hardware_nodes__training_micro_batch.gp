# fsdpsim report: best throughput that fits over hardware.nodes and training.micro_batch.
# From sweep.csv; data: heatmap_hardware_nodes__training_micro_batch.tsv (block 0: cells with a point that fits; block 1: cells without). Edit freely, then re-render with: gnuplot heatmap_hardware_nodes__training_micro_batch.gp
if (!exists("outfile")) outfile = 'heatmap_hardware_nodes__training_micro_batch.svg'
set terminal svg size 820,600 noenhanced font "Helvetica,12" background rgb "white"
set output outfile
set datafile separator "\t"
set title "best tokens/s per GPU that fits (over the other axes)"
set xrange [-0.5:1.5]
set xtics ('2' 0, '4' 1)
set yrange [-0.5:1.5]
set ytics ('48' 0, '58' 1)
set xlabel 'hardware.nodes'
set ylabel 'training.micro_batch'
set tics scale 0
unset key
set palette defined (0 "#ffffcc", 1 "#a1dab4", 2 "#41b6c4")
set cblabel "tokens/s per GPU"
plot "heatmap_hardware_nodes__training_micro_batch.tsv" index 0 using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder fc palette, \
     "heatmap_hardware_nodes__training_micro_batch.tsv" index 0 using 1:2:4 with labels
