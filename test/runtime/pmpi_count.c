/* An MPI profiling-interface wrapper, preloaded into the tests: counts the
   bytes each rank hands to MPI_Send and MPI_Isend, independently of the
   runtime's own counters, and prints them at MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>

static long long sent;

static void add(int count, MPI_Datatype type) {
  int size = 0;
  PMPI_Type_size(type, &size);
  sent += (long long)count * size;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
             MPI_Comm comm) {
  add(count, type);
  return PMPI_Send(buf, count, type, dest, tag, comm);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm, MPI_Request *request) {
  add(count, type);
  return PMPI_Isend(buf, count, type, dest, tag, comm, request);
}

int MPI_Finalize(void) {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "pmpi: rank %d sent %lld bytes\n", rank, sent);
  fflush(stdout);
  return PMPI_Finalize();
}
