# The for_each key of kafkamirror_mirror_topic.orders was the topic name; now it is the
# topic's short name. Each moved block keeps a topic, its owner_id and its state.
moved {
  from = kafkamirror_mirror_topic.orders["orders.created"]
  to   = kafkamirror_mirror_topic.orders["created"]
}
