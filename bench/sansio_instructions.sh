#!/bin/sh
# Instructions per operation (see sansio_instructions.py): sh bench/sansio_instructions.sh MODE N [PYTHON]
# Run from the tree to measure, with its src first on PYTHONPATH.
mode=$1; n=$2; py=${3:-python}
out=$(mktemp -d)
for k in 0 "$n"; do
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.$k" "$py" bench/sansio_instructions.py --mode "$mode" --n "$k" >/dev/null 2>&1
done
a=$(callgrind_annotate "$out/cg.0" | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
b=$(callgrind_annotate "$out/cg.$n" | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
echo "$mode: $(( (b - a) / n )) instructions per operation ($n operations)"
rm -r "$out"
