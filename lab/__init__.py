"""ccm-lab: the world around the controller (AWS endpoint, metadata, cluster, orchestration)."""
