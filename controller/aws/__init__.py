"""The AWS implementation of the cloud provider contract (the only boto3 importer in controller/)."""
