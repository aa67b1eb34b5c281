#!/bin/bash
# One generation job split over a SLURM array of 4 tasks, then merged into the ledger a single run would write.
#
#   bash examples/slurm_array.sh examples/jobs/independent.toml runs/independent
#
# Run by hand, it submits itself as the array (the #SBATCH lines below) and a merge job that waits for every task
# of the array to end well (--dependency=afterok). Each array task runs `mindcap-tok generate` without --shard: it
# reads its part from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (0-based, so the array is 0-(N-1); change
# --array to change N) and writes it into its own ledger, OUT/part-I. A task that died (preempted, out of time) is
# resumed by resubmitting its index (sbatch --array=2 examples/slurm_array.sh JOB OUT): it skips what it had
# committed; then run the merge again. The merge writes OUT/merged and checks it; rerun after a kill, it finishes.
# See docs/generation.md, "Past one machine: parts and merge".
#
#SBATCH --job-name=mindcap-gen
#SBATCH --array=0-3
#SBATCH --gpus=1
#SBATCH --cpus-per-task=8
#SBATCH --time=24:00:00
#SBATCH --output=%x-%A_%a.out
set -euo pipefail

JOB=${1:?usage: bash examples/slurm_array.sh JOB.toml OUT}
OUT=${2:?usage: bash examples/slurm_array.sh JOB.toml OUT}

if [ -z "${SLURM_ARRAY_TASK_ID:-}" ]; then
    # by hand: submit the array, then the merge (CPU only) once every part has ended well
    array=$(sbatch --parsable "$0" "$JOB" "$OUT")
    merge="mindcap-tok ledger merge $(printf '%q' "$OUT")/part-* --out-dir $(printf '%q' "$OUT/merged")"
    merge+=" && mindcap-tok ledger verify $(printf '%q' "$OUT/merged")"
    sbatch --job-name=mindcap-merge --time=1:00:00 --dependency="afterok:${array%%;*}" --wrap "$merge"
    exit 0
fi

# an array task: generate this task's part (the part and where it came from are said on stderr)
mindcap-tok generate "$JOB" --out-dir "$OUT/part-$SLURM_ARRAY_TASK_ID"
