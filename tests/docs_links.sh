#!/bin/sh
# tests/docs_links.sh: every relative link and image in README.md,
# EXPERIMENTS.md and docs/*.md points at a file that exists, and every #anchor at a heading of
# the page it names. Links to other sites (http:, https:, mailto:) are not
# followed. Run from the repository root; exits 1 and lists what is broken.
set -eu
cd "$(dirname "$0")/.."

# A heading's anchor as GitHub makes it: lower case, punctuation other than
# '-' and '_' dropped, spaces turned into '-'.
anchors() {
    sed -n 's/^#\{1,6\} \{1,\}//p' "$1" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}

bad=0
checked=0
for page in README.md EXPERIMENTS.md docs/*.md; do
    dir=$(dirname "$page")
    # the targets of ](target) and ](target "title"), one per line, outside code spans
    links=$(sed 's/`[^`]*`//g' "$page" | grep -o '](\([^)]*\))' | sed 's/^](//; s/)$//; s/ .*//') || true
    for link in $links; do
        case "$link" in
            http:* | https:* | mailto:*) continue ;;
        esac
        path=${link%%#*}
        anchor=
        case "$link" in *'#'*) anchor=${link#*#} ;; esac
        if [ -z "$path" ]; then target=$page; else target=$dir/$path; fi
        checked=$((checked + 1))
        if [ ! -e "$target" ]; then
            echo "docs_links: $page: $link: no such file ($target)"
            bad=$((bad + 1))
        elif [ -n "$anchor" ]; then
            case "$target" in
                *.md)
                    if ! anchors "$target" | grep -qx -- "$anchor"; then
                        echo "docs_links: $page: $link: no heading '#$anchor' in $target"
                        bad=$((bad + 1))
                    fi
                    ;;
            esac
        fi
    done
done
if [ "$bad" -ne 0 ]; then
    echo "docs_links: $bad of $checked links broken"
    exit 1
fi
echo "docs_links: $checked links, all resolve"
