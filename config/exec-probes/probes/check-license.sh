#!/bin/sh
# An exec probe script, the one config/samples/autoreboot_v1alpha1_rebootpolicy_exec.yaml
# names: exit 0 means healthy, anything else is a failure. Replace it with a
# real check, e.g. one that verifies a license server answers.
exit 0
