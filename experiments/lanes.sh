# Sourced by record.sh and stitching.sh: run a lane's suite commands one after another, pinned to one core, one thread.
run_lane() {  # run_lane CORE COMMAND...
  local core=$1 command
  shift
  export OMP_NUM_THREADS=1
  for command in "$@"; do
    echo "== $command"
    # shellcheck disable=SC2086  # the command is split into words on purpose
    taskset -c "$core" $command
  done
}
