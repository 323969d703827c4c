# A cluster mirror is imported by its name. Secrets cannot be imported (the worker never
# returns them): set password_wo (or password) in the configuration afterwards.
terraform import kafkamirror_cluster_mirror.eu_to_us eu-to-us
