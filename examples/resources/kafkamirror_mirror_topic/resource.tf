# Mirror "orders" over the eu-to-us cluster mirror.
resource "kafkamirror_mirror_topic" "orders" {
  mirror_name = kafkamirror_cluster_mirror.eu_to_us.name
  topic       = "orders"

  # "mirroring" (default), "paused" or "stopped". Setting "stopped" ends mirroring and
  # the destination topic becomes writable. The plan warns with the stop mode, the
  # partitions and their lag.
  state = "mirroring"

  # How "stopped" and a destroy stop the topic: "failover" (default: at once, the lag
  # stays behind) or "promote" (a planned migration: wait for lag 0 and a final consumer
  # group offset sync, at most promote_timeout, or stop nothing and fail the apply).
  stop_mode       = "promote"
  promote_timeout = "2m"

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
