# Sourced by the scripted contestants (POSIX sh). Not an agent itself.
#
#   which_change BRIEF   -> "horizon-units" or "cap-horizon"
#       Read from the brief's text first (what a real agent has), then $BAKEOFF_CHANGE.
#   commit_all MESSAGE   -> `git add -A` and commit, only when something changed
#   py_check CODE        -> run python3 with src/ importable; exit status of CODE

which_change() {
  if [ -n "${1:-}" ] && [ -f "$1" ]; then
    if grep -q 'time_horizon_weeks' "$1"; then echo horizon-units; return; fi
    if grep -q 'time_horizon_days' "$1"; then echo cap-horizon; return; fi
  fi
  case "${BAKEOFF_CHANGE:-}" in
    *units*) echo horizon-units ;;
    *) echo cap-horizon ;;
  esac
}

commit_all() {
  git add -A
  if git diff --cached --quiet; then
    echo "nothing new to commit"
  else
    git commit -q -m "$1"
    echo "committed: $1"
  fi
}

py_check() {
  PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1 python3 -c "$1" >/dev/null 2>&1
}

# True when the service still accepts a 91-day horizon (change 1 not yet fixed).
horizon_bug_present() {
  ! py_check '
from horizon.app import ValidationError, parse_request
try:
    parse_request({"series": [1, 2, 3], "time_horizon_days": 91})
except ValidationError:
    raise SystemExit(0)
raise SystemExit(1)'
}

# True when time_horizon_weeks is already supported (change 2 done).
weeks_supported() {
  py_check '
from horizon.app import parse_request
raise SystemExit(0 if parse_request({"series": [1, 2], "time_horizon_weeks": 2}).horizon_days == 14 else 1)'
}
