/* ArkGPU LC client library: an inference server reports each request's or
 * batch's latency into its container's usage region (lock-free ring) and
 * marks its batches in flight, so that best-effort containers on its GPU may
 * borrow its compute share only while it has no batch executing. */
#ifndef ARKGPU_CLIENT_H
#define ARKGPU_CLIENT_H
#include <stdint.h>

typedef struct arkgpu_client arkgpu_client;

/* Map <region_dir>/usage; NULL with errno set on failure. */
arkgpu_client *arkgpu_client_open(const char *region_dir);
/* Append one latency sample; returns its sequence number (>= 1). */
uint64_t arkgpu_client_report(arkgpu_client *c, uint64_t latency_ns, uint64_t batch);
/* A batch starts executing: returns the number of batches in flight after it. */
uint64_t arkgpu_client_batch_begin(arkgpu_client *c);
/* A batch has finished: returns the number in flight after it (an end
 * without a matching begin leaves the count at 0). */
uint64_t arkgpu_client_batch_end(arkgpu_client *c);
/* Batches in flight now. */
uint64_t arkgpu_client_batches_in_flight(arkgpu_client *c);
void arkgpu_client_close(arkgpu_client *c);

#endif
