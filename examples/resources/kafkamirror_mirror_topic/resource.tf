# Mirror "orders" over the eu-to-us cluster mirror.
resource "kafkamirror_mirror_topic" "orders" {
  mirror_name = kafkamirror_cluster_mirror.eu_to_us.name
  topic       = "orders"

  # "mirroring" (default), "paused" or "stopped". Setting "stopped" fails the topic over:
  # mirroring ends and the destination topic becomes writable. The plan warns with the
  # partitions and the records of lag that will not be copied.
  state = "mirroring"

  # What a (re)start does when the destination has records the source lacks:
  # "fail" (default) or "recreate" the destination topic.
  divergence = "fail"

  timeouts = {
    create = "15m"
    update = "10m"
    delete = "10m"
  }
}

# Outputs of values that change only with the configuration keep plans quiet; lag moves
# all the time (watch it with the worker's metrics or `kafkamirror-worker describe`).
output "orders_mirror_name" {
  value = kafkamirror_mirror_topic.orders.mirror_name_config
}
