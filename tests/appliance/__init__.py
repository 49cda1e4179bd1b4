"""The appliance: the image, its containers, the hook through `docker exec`, MCP over
`docker run -i`."""
