#!/bin/sh
# An exec probe script: exit 0 means healthy, anything else is a failure.
# RebootPolicy names it as `probe: {exec: {command: ["example.sh", "ARG"]}}`.
# Replace this file with your own checks.
test -n "$1"
