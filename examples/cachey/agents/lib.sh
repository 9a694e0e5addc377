# Sourced by the scripted contestants (POSIX sh). Not an agent itself.
#
#   commit_all MESSAGE   -> `git add -A` and commit, only when something changed
#   edit FILE OLD NEW    -> replace the first OLD by NEW in FILE (python3), if OLD is there

commit_all() {
  git add -A
  if git diff --cached --quiet; then
    echo "nothing new to commit"
  else
    git commit -q -m "$1"
    echo "committed: $1"
  fi
}

edit() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys
from pathlib import Path

path, old, new = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
text = path.read_text()
if old in text:
    path.write_text(text.replace(old, new, 1))
PY
}
