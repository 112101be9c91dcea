"""Data: the etcd configuration and systemd unit CCattler deploys (see README.md here)."""
