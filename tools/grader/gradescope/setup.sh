#!/usr/bin/env bash
# Gradescope image setup (Debian 12 base): the course checkout is /autograder/source. Installs the packages
# and the grader's user.
set -euo pipefail
cd /autograder/source
./labctl setup
