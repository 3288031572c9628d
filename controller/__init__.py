"""The ccm-lab Python AWS cloud controller manager (the system under test).

Layout: ``cloud`` (the provider contract), ``aws/`` (the AWS implementation, the only boto3
user), ``service`` / ``node`` / ``lifecycle`` (the generic controllers, which see only the
contract), ``runtime/`` (informers, work queue, events, leader election, health and metrics,
logging, the Kubernetes access seam), ``fake`` (in-memory cloud and apiserver for unit tests),
``legacy`` (switchable legacy behaviours), ``app`` and ``__main__`` (the manager and the CLI,
``python -m controller --help``).
"""
