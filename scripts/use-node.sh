# Sourced from the checkout's root: `. scripts/use-node.sh`. Puts Node 22 or later first on this shell's PATH (the
# machine's when it is recent enough, else Node 24 that scripts/ensure-tools.sh installs into the tools cache), so that
# npm, jest and every process they start run on it, and points native builds (better-sqlite3) at its headers instead
# of the machine's older ones: npm's nodedir may name /usr.
_use_node_dir=$(bash "$(dirname "${BASH_SOURCE:-scripts/use-node.sh}")/ensure-tools.sh" node) || return 1
_use_node_dir=${_use_node_dir#node=}
case ":$PATH:" in
  ":$_use_node_dir:"*) ;;
  *) PATH="$_use_node_dir:$PATH" ;;
esac
export PATH
if [ -f "${_use_node_dir%/bin}/include/node/node_version.h" ]; then
  export npm_config_nodedir="${_use_node_dir%/bin}"
fi
hash -r
unset _use_node_dir
