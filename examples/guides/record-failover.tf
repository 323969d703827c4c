# Topics failed over outside Terraform (kafkamirror-worker stop), recorded so that the next
# apply keeps them stopped instead of restarting them.
variable "stopped_topics" {
  description = "Source topics failed over, which must stay stopped."
  type        = set(string)
  default     = ["orders.created"]
}

resource "kafkamirror_mirror_topic" "orders" {
  for_each = toset(kafkamirror_cluster_mirror.primary.source_topics)

  mirror_name = kafkamirror_cluster_mirror.primary.name
  topic       = each.value
  state       = contains(var.stopped_topics, each.value) ? "stopped" : "mirroring"
}
