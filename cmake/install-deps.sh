#!/bin/sh
# Installs the Debian 12 packages clustersim builds with, if any is missing.
# As root it runs apt-get; otherwise it prints the one command to run and fails.
set -eu
PACKAGES="make cmake g++ libboost-graph-dev libboost-program-options-dev libprotobuf-dev protobuf-compiler doctest-dev"
missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "clustersim: installing missing Debian packages:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends $missing
else
  echo "clustersim: missing Debian packages:$missing" >&2
  echo "run:  sudo apt-get install -y$missing" >&2
  exit 1
fi
