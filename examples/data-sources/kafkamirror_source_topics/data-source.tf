# Every topic on the source whose name starts with "payments.".
#
# The mirror name is a literal: a reference to kafkamirror_cluster_mirror.<name>.name would
# make Terraform defer this read to the apply whenever the mirror has a pending change, and
# its result would be unknown at plan time. To mirror a set of topics with for_each, use the
# mirror's own source_topics (source_topics_pattern) instead: it is known at plan time even
# when the same plan creates or changes the mirror.
data "kafkamirror_source_topics" "payments" {
  mirror_name = "eu-to-us"
  pattern     = "^payments\\."
}

# For example: warn, without failing the plan, when a payments topic is not mirrored.
check "payments_mirrored" {
  assert {
    condition = alltrue([
      for topic in data.kafkamirror_source_topics.payments.topics :
      contains(keys(kafkamirror_mirror_topic.payments), topic)
    ])
    error_message = "A payments topic on the source has no kafkamirror_mirror_topic."
  }
}
