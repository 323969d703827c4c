# A mirror topic is imported by <mirror_name>/<topic>.
terraform import kafkamirror_mirror_topic.orders eu-to-us/orders
