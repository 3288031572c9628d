"""The ccm-lab Python AWS cloud controller manager (the system under test)."""
