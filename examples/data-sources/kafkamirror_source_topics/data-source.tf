# Every topic on the source whose name starts with "payments.".
#
# The data source asks the worker at plan time, and for_each needs its result then: the
# cluster mirror must already exist (apply it first, for example with -target).
data "kafkamirror_source_topics" "payments" {
  mirror_name = kafkamirror_cluster_mirror.eu_to_us.name
  pattern     = "^payments\\."
}

resource "kafkamirror_mirror_topic" "payments" {
  for_each = toset(data.kafkamirror_source_topics.payments.topics)

  mirror_name = kafkamirror_cluster_mirror.eu_to_us.name
  topic       = each.value
}
