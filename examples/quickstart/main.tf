# The quickstart: mirror the topic "orders" from the embedded source cluster into the embedded
# destination cluster, then fail over by setting topic_state = "stopped".
terraform {
  required_providers {
    kafkamirror = {
      source = "kafkamirror/kafkamirror"
    }
  }
}

variable "worker_url" {
  type    = string
  default = "http://127.0.0.1:8080"
}

variable "worker_token" {
  type      = string
  sensitive = true
}

variable "source_bootstrap_servers" {
  type    = list(string)
  default = ["127.0.0.1:19092"]
}

variable "topic_state" {
  description = "mirroring, paused or stopped (failover)"
  type        = string
  default     = "mirroring"
}

provider "kafkamirror" {
  worker_url   = var.worker_url
  worker_token = var.worker_token
}

resource "kafkamirror_cluster_mirror" "primary" {
  name = "primary-to-dr"
  source = {
    bootstrap_servers = var.source_bootstrap_servers
  }
}

resource "kafkamirror_mirror_topic" "orders" {
  mirror_name = kafkamirror_cluster_mirror.primary.name
  topic       = "orders"
  state       = var.topic_state
}

# The KIP's mirror.name value ("primary-to-dr", or with ".removed" after the failover). Lag
# is left out on purpose: it moves all the time, and an output of it would make every plan
# report a change. `kafkamirror-worker describe` shows it.
output "orders_mirror_name" {
  value = kafkamirror_mirror_topic.orders.mirror_name_config
}
