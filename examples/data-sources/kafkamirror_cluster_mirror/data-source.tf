data "kafkamirror_cluster_mirror" "eu_to_us" {
  name = "eu-to-us"
}

output "eu_to_us_topics" {
  value = data.kafkamirror_cluster_mirror.eu_to_us.topics
}
