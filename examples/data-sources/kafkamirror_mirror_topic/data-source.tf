data "kafkamirror_mirror_topic" "orders" {
  mirror_name = "eu-to-us"
  topic       = "orders"
}

# Total records not copied yet, for example before a planned failover.
output "orders_total_lag" {
  value = sum([for p in data.kafkamirror_mirror_topic.orders.partitions : p.lag])
}
