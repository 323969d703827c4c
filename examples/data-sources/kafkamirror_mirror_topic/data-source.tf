data "kafkamirror_mirror_topic" "orders" {
  mirror_name = "eu-to-us"
  topic       = "orders"
}

# Lag moves all the time: an output of it would make every `terraform plan
# -detailed-exitcode` report a change. A check block reports a lag above a threshold as a
# warning instead, and the plan stays empty. For continuous watching use the worker's
# metrics (kafkamirror_partition_lag, kafkamirror_max_lag) or `kafkamirror-worker describe`.
check "orders_lag" {
  assert {
    condition     = sum([for p in data.kafkamirror_mirror_topic.orders.partitions : p.lag]) < 10000
    error_message = "Topic orders is more than 10000 records behind its source."
  }
}
