terraform {
  required_providers {
    kafkamirror = {
      source = "kafkamirror/kafkamirror"
    }
  }
}

# The worker that mirrors into the destination cluster. The token can also come from
# KAFKAMIRROR_WORKER_TOKEN, and the URL from KAFKAMIRROR_WORKER_URL.
provider "kafkamirror" {
  worker_url   = "https://kafkamirror-worker.us-east.example.com:8080"
  worker_token = var.worker_token

  worker_tls = {
    ca_cert_pem = file("${path.module}/worker-ca.pem")
  }

  # Optional: lets plans warn before a mirror topic is created over a destination
  # topic that already holds records. Read-only; the worker has its own connection.
  destination = {
    bootstrap_servers = ["kafka-1.us-east.example.com:9093"]
    tls               = { enabled = true }
    sasl = {
      mechanism = "SCRAM-SHA-512"
      username  = "terraform-readonly"
      password  = var.destination_password
    }
  }
}

variable "worker_token" {
  type      = string
  sensitive = true
}

variable "destination_password" {
  type      = string
  sensitive = true
}
