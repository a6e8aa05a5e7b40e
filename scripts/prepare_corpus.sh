#!/usr/bin/env bash
# A small real English corpus, offline, from two Debian packages' texts: the King James Bible
# (bible-kjv: one document per chapter, verse numbers dropped) and the Perl manual (perl-doc: one
# document per .pod file) — about 13 MB of JSON lines, 1395 documents — tokenized with GPT-2's BPE
# by `mplan preprocess` into OUT_DIR/kjv_perl_text_document.bin/.idx (about 4.1 M tokens).
# Needs: the two packages (apt-get install bible-kjv perl-doc), GPT-2's vocabulary in data/gpt2/
# (scripts/setup.sh installs it) and a built mplan (build/cli/mplan, or $MPLAN).
# Usage: scripts/prepare_corpus.sh [OUT_DIR]   (default data/corpus; git-ignored)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/corpus}
mplan=${MPLAN:-build/cli/mplan}
for tool in bible python3; do
  command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install bible-kjv python3)"; exit 1; }
done
dpkg -L perl-doc >/dev/null 2>&1 || { echo "needs perl-doc (apt-get install perl-doc)"; exit 1; }
[ -f data/gpt2/encoder.json ] && [ -f data/gpt2/vocab.bpe ] ||
  { echo "needs GPT-2's vocabulary in data/gpt2/ (scripts/setup.sh installs it)"; exit 1; }
[ -x "$mplan" ] || { echo "needs a built mplan at $mplan (or set MPLAN)"; exit 1; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bible "gen1:1-rev22:21" > "$work/kjv.txt"
python3 - "$work/kjv.txt" "$work/corpus.jsonl" <<'PY'
import json, re, subprocess, sys
docs, cur = [], None
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.rstrip("\n")
    if re.match(r"^[1-3]?\s?[A-Z][A-Za-z ]+ \d+$", line):  # "Genesis 1": a new chapter
        if cur:
            docs.append(" ".join(cur))
        cur = []
    elif cur is not None and line.strip():
        cur.append(re.sub(r"^\d+ ", "", line.strip()))  # drop the verse numbers
docs.append(" ".join(cur))
pods = sorted(p for p in subprocess.run(["dpkg", "-L", "perl-doc"], capture_output=True,
                                        text=True).stdout.split() if p.endswith(".pod"))
with open(sys.argv[2], "w") as out:
    for d in docs:
        out.write(json.dumps({"text": d}) + "\n")
    for p in pods:
        out.write(json.dumps({"text": open(p, encoding="utf-8", errors="replace").read()}) + "\n")
print(f"{len(docs)} chapters of the KJV, {len(pods)} Perl manual pages")
PY
"$mplan" preprocess --input "$work/corpus.jsonl" --output-prefix "$out/kjv_perl" \
  --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --append-eod --workers 2
echo "data prefix: $out/kjv_perl_text_document"
