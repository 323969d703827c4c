# A mirror from the eu-west cluster into the cluster the worker runs against.
resource "kafkamirror_cluster_mirror" "eu_to_us" {
  name = "eu-to-us"

  source = {
    bootstrap_servers = ["kafka-1.eu-west.example.com:9093", "kafka-2.eu-west.example.com:9093"]

    tls = {
      ca_cert_pem = file("${path.module}/eu-west-ca.pem")
    }

    sasl = {
      mechanism = "SCRAM-SHA-512"
      username  = "kafkamirror"
      # Write-only (Terraform 1.11+): sent to the worker, never stored in the state.
      # Bump password_wo_version to send a rotated password.
      password_wo         = var.eu_west_password
      password_wo_version = 1
    }
  }

  # Optional: refuse to create the mirror unless the source is this cluster.
  source_cluster_id = "Qz1pbmNsdXN0ZXItZXU"

  sync = {
    interval        = "30s"
    consumer_groups = true
    group_excludes  = ["^_confluent"]
  }

  # Optional: how the worker creates destination topics. Default: the source topic's
  # replication factor (capped by the destination's broker count) and min.insync.replicas
  # from the source's override, else 2 from 3 replicas on.
  destination_topics = {
    replication_factor  = 3
    min_insync_replicas = 2
  }

  # Lists the matching source topics in source_topics, known at plan time.
  source_topics_pattern = "^orders\\."
}

# One mirror topic per matching source topic. It plans in one step, also when the same plan
# creates the mirror or changes it in place; a topic deleted on the source is failed over.
resource "kafkamirror_mirror_topic" "orders" {
  for_each = toset(kafkamirror_cluster_mirror.eu_to_us.source_topics)

  mirror_name = kafkamirror_cluster_mirror.eu_to_us.name
  topic       = each.value
}

variable "eu_west_password" {
  type      = string
  sensitive = true
  ephemeral = true
}
