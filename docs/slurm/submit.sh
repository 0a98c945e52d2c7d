#!/usr/bin/env bash
# Submits the gate's job array and, after it (whatever its tasks' exit
# codes), the merge of their reports. DRY_RUN=1 prints the sbatch commands.
#   docs/slurm/submit.sh            then read out/slurm/<job id>/merged/report.md
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p out/slurm
if [ -n "${DRY_RUN:-}" ]; then
	echo "sbatch --parsable docs/slurm/gate-array.sbatch"
	echo "sbatch --dependency=afterany:JOBID --job-name=ssmverify-merge --output=out/slurm/merge-JOBID.log --export=ALL,OUT_ROOT=out/slurm/JOBID --wrap 'bash docs/slurm/gate-array.sbatch --merge'"
	exit 0
fi
jid=$(sbatch --parsable docs/slurm/gate-array.sbatch)
sbatch --dependency="afterany:$jid" --job-name=ssmverify-merge --output="out/slurm/merge-$jid.log" \
	--export="ALL,OUT_ROOT=out/slurm/$jid" --wrap 'bash docs/slurm/gate-array.sbatch --merge'
echo "submitted array $jid; merged report: out/slurm/$jid/merged/report.md"
