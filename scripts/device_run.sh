#!/usr/bin/env bash
# The one command for the device machine: scripts/device_check.sh in a scratch folder, its results packed into
# the few files that come back from the device's $OUT (at most 8, at most 2 folders deep), and packed again
# every DEVICE_RUN_PACK_S seconds while it runs, so that a call killed at its limit still returns what had
# finished. See docs/device-check.md.
#
#   scripts/device_run.sh "$OUT"             # on the GPU machine: ~7 minutes, give the call timeout_s 560
#   scripts/device_run.sh --dry-run OUTDIR   # no GPU: the dry run, packed the same way
#
# What comes back: summary.txt (steps, status, seconds), roofs.json (the default run's roofs, saved after each
# benchmark; the simulated one in a dry run), BENCHMARKS.fragment.md (at the end), results.tgz (the whole
# scratch folder, every log included, but .ncu-rep/.nsys-rep reports, which are large; their CSVs are in it).
# Environment: DEVICE_RUN_SCRATCH (default: a new folder under /tmp), DEVICE_RUN_PACK_S (default 20), and
# device_check.sh's own.
set -u

DRY=()
if [ "${1:-}" = "--dry-run" ]; then DRY=(--dry-run); shift; fi
if [ $# -ne 1 ] || [ "${1:0:1}" = "-" ]; then
    echo "usage: $0 [--dry-run] OUT" >&2
    exit 2
fi
mkdir -p "$1" || exit 2
OUT=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
SCRATCH=${DEVICE_RUN_SCRATCH:-$(mktemp -d /tmp/ceilings-device-check.XXXXXX)}
mkdir -p "$SCRATCH" || exit 2
EVERY_S=${DEVICE_RUN_PACK_S:-20}
export PYTHONUNBUFFERED=1

# put SRC DEST: copy SRC into $OUT/DEST in one rename, so a kill never leaves half a file there.
put() {
    [ -s "$1" ] || return 0
    cp "$1" "$OUT/.$2.tmp" && mv -f "$OUT/.$2.tmp" "$OUT/$2"
}

# pack: what has finished so far, into $OUT (4 files).
pack() {
    put "$SCRATCH/summary.txt" summary.txt
    local roofs
    for roofs in roofs.json roofs-quick.json roofs-simulated.json; do
        [ -s "$SCRATCH/$roofs" ] && { put "$SCRATCH/$roofs" roofs.json; break; }
    done
    put "$SCRATCH/BENCHMARKS.fragment.md" BENCHMARKS.fragment.md
    # exit status 1: a file changed while it was read (a log being written); the archive is whole all the same
    tar -czf "$OUT/.results.tgz.tmp" --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.qdstrm' \
        -C "$SCRATCH" . 2> /dev/null
    if [ $? -le 1 ]; then mv -f "$OUT/.results.tgz.tmp" "$OUT/results.tgz"; else rm -f "$OUT/.results.tgz.tmp"; fi
}

echo "== device_run: scratch $SCRATCH, packed into $OUT every ${EVERY_S} s" >&2
(while sleep "$EVERY_S"; do pack; done) &
PACKER=$!
bash "$HERE/device_check.sh" "${DRY[@]}" "$SCRATCH" > >(tee "$SCRATCH/device-check.log") 2>&1 &
CHECK=$!
STOPPED=""
# SIGTERM: device_check.sh stops its running step (which saves what it measured) and writes the fragment
trap 'STOPPED=1; kill -TERM "$CHECK" 2> /dev/null' TERM
wait "$CHECK"
RC=$?
if [ -n "$STOPPED" ]; then wait "$CHECK"; RC=$?; fi  # the trap cut the first wait short
kill "$PACKER" 2> /dev/null
wait "$PACKER" 2> /dev/null
pack
# the logs of the steps that did not go well, at the end of the output the device call returns
awk -F'\t' '!/^#/ && ($2 ~ /^(timeout|failed|stopped)/) { print $1 }' "$SCRATCH/summary.txt" 2> /dev/null |
    while read -r name; do
        echo "== tail of logs/$name.log" >&2
        tail -n 15 "$SCRATCH/logs/$name.log" >&2
    done
ls -l "$OUT" >&2
exit $RC
