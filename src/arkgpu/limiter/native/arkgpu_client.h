/* ArkGPU LC latency channel: an inference server reports each request's or
 * batch's latency into its container's usage region (lock-free ring). */
#ifndef ARKGPU_CLIENT_H
#define ARKGPU_CLIENT_H
#include <stdint.h>

typedef struct arkgpu_client arkgpu_client;

/* Map <region_dir>/usage; NULL with errno set on failure. */
arkgpu_client *arkgpu_client_open(const char *region_dir);
/* Append one latency sample; returns its sequence number (>= 1). */
uint64_t arkgpu_client_report(arkgpu_client *c, uint64_t latency_ns, uint64_t batch);
void arkgpu_client_close(arkgpu_client *c);

#endif
