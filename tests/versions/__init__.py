"""Tests of lab.versions: the version type, provisioning facts and the release table."""
