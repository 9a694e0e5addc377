# Sourced by the scripted contestants (POSIX sh). Not an agent itself.
#
#   which_change BRIEF  -> "passkeys" or "cap-ui" (the brief's text first, then
#                          $BAKEOFF_CHANGE)
#   commit_all MESSAGE  -> `git add -A` and commit, only when something changed

which_change() {
  if [ -n "${1:-}" ] && [ -f "$1" ]; then
    if grep -qi 'passkey' "$1"; then echo passkeys; return; fi
    if grep -q 'Days ahead' "$1"; then echo cap-ui; return; fi
  fi
  case "${BAKEOFF_CHANGE:-}" in
    *passkey*) echo passkeys ;;
    *) echo cap-ui ;;
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
